"""The AWS CDK app that deploys Squadron (synthesizes offline, without Docker or credentials)."""
