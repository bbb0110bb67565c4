"""Model-provider adapters behind the ``ModelProvider`` port (``shared.ports``): one module per provider.

``bedrock`` (Amazon Bedrock Converse through boto3), ``openai`` (the OpenAI-compatible chat-completions wire
through the egress-guarded ``HttpTransport``), ``mock`` (the spec's deterministic mock-provider catalog plus a
scripted form). ``prices`` holds the cost table. Only ``shared.wiring`` builds these.
"""
