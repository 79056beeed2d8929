"""The C extensions; everything else about the package is in pyproject.toml.

``optional=True``: where they cannot be compiled (no C compiler), the package installs without
them, ``ledgermq.store.append_plan`` uses its pure-Python planner and the Spark connector
decodes records in Python (``ledgermq.spark.arrow_rows``), and the dispatcher scans records in
Python (``ledgermq.wire.message``) and the key index hashes and links keys in Python
(``ledgermq.broker.storage.key_index``).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ledgermq.broker.storage._key_index",
            ["src/ledgermq/broker/storage/_key_index.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "ledgermq.store._speedups",
            ["src/ledgermq/store/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "ledgermq.wire._record_columns",
            ["src/ledgermq/wire/_record_columns.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "ledgermq.wire._record_decode",
            ["src/ledgermq/wire/_record_decode.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "ledgermq.wire._frame_codec",
            ["src/ledgermq/wire/_frame_codec.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        Extension(
            "ledgermq.wire._dispatch_scan",
            ["src/ledgermq/wire/_dispatch_scan.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
