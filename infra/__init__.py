"""CDK app for the OpenWOP serverless host (aws-cdk-lib only; runtime code never imports this package)."""
