"""Adapters to the deployment's own metadata (CloudFormation stack outputs), used by the operator CLI."""
