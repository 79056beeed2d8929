"""The C extensions; everything else about the package is in pyproject.toml.

``optional=True``: where they cannot be compiled (no C compiler), the package installs without
them, ``ledgermq.store.append_plan`` uses its pure-Python planner and the Spark connector
decodes records in Python (``ledgermq.spark.arrow_rows``), and the dispatcher scans records in
Python (``ledgermq.wire.message``) and the key index hashes and links keys in Python
(``ledgermq.broker.storage.key_index``).

The sample configuration (the repository's ``conf/`` and ``deploy/``) goes into the wheel as
package data under ``ledgermq/samples/``, copied at build time (``build_py`` below) rather than
moved into the package, so that the repository keeps the paths the README names;
``ledgermq init-conf DIR`` writes them out from an installed package. MANIFEST.in puts both
folders into the sdist, so a wheel built from it has them too.
"""

import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

SAMPLE_DIRS = ("conf", "deploy")
"""Folders of the repository shipped as ``ledgermq/samples/<folder>/``."""


class BuildWithSamples(build_py):
    """``build_py`` that also copies the sample folders into the built package."""

    def run(self) -> None:
        super().run()
        root = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "ledgermq" / "samples"
        for name in SAMPLE_DIRS:
            source = root / name
            if not source.is_dir():
                raise SystemExit(f"{source} is missing: the wheel would ship without its samples")
            shutil.rmtree(target / name, ignore_errors=True)
            shutil.copytree(source, target / name)


setup(
    cmdclass={"build_py": BuildWithSamples},
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
    ],
)
