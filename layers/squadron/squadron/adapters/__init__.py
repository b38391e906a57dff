"""Adapters: the only modules that import boto3 or httpx. Each maps its service errors to Squadron errors."""
