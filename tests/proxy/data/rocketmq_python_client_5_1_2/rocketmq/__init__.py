# Not the wheel's: its rocketmq/__init__.py imports the whole client (and opentelemetry). The
# tests need only the generated protocol modules in grpc_protocol/, which are the wheel's, verbatim.
