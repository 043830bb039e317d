# BUILD macros for the lowerkit packages (loaded by [GLOBAL] build_file_prelude_globs).
# A package's BUILD says only what is its own: its wheel's name, version and description, its
# first-party edges (with a comment saying why) and its test batch. The shared shape lives here.

_PYTHON_REQUIRES = ">=3.11,<3.12"


def lowerkit_package(wheel, version, description, first_party=(), entry_points=None):
    """A package: dependency rules (only its declared first-party edges and 3rd-party
    requirements, docs/architecture.md "Dependency edges") and its wheel, `:dist`."""
    __dependencies_rules__(
        ("*", "/**", *[f"//packages/{package}/src/**" for package in first_party], "//3rdparty/**", "!*"),
    )
    python_distribution(
        name="dist",
        dependencies=["./src:src"],
        provides=python_artifact(
            name=wheel,
            version=version,
            description=description,
            python_requires=_PYTHON_REQUIRES,
            license="BSD-3-Clause",
        ),
        entry_points=entry_points,
        wheel=True,
        sdist=False,
    )


def lowerkit_package_tests(batch, dependencies=(), extra_env_vars=None, test_utils=()):
    """A package's tests, run as one pytest batch (torch and ExecuTorch are imported once per
    batch, docs/ci.md), and their conftest / helper modules."""
    python_tests(
        name="tests",
        sources=["**/test_*.py"],
        batch_compatibility_tag=batch,
        # torch warns without numpy, which it does not declare.
        dependencies=["//3rdparty/python:reqs#numpy", *dependencies],
        extra_env_vars=extra_env_vars,
    )
    python_test_utils(name="test_utils", sources=["**/conftest.py", "**/__init__.py", *test_utils])
