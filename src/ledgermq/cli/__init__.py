"""The ``ledgermq`` command line: thin wrappers that parse, call, print and exit."""
