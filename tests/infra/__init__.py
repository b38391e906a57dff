"""Synthesis tests of the CDK app (marked `infra`)."""
