"""The C extension; everything else about the package is in pyproject.toml.

``optional=True``: where it cannot be compiled (no C compiler), the package installs without it
and ``ledgermq.store.append_plan`` uses its pure-Python planner.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ledgermq.store._speedups",
            ["src/ledgermq/store/_speedups.c"],
            optional=True,
            extra_compile_args=["-O2"],
        )
    ]
)
