"""vllm-queue-autoscaler: scale vLLM Deployments on queue depth and KV-cache pressure."""

DISTRIBUTION = "vllm-queue-autoscaler"


def package_version() -> str:
    """The installed distribution's version; from a source tree without installed metadata, the
    version in pyproject.toml beside this package; "0+unknown" when neither can be read."""
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pass
    import tomllib
    from pathlib import Path

    try:
        project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
        return str(project["project"]["version"])
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError):
        return "0+unknown"


__version__ = package_version()
