"""`python -m grammarc` and the `grammarc` command: the command line."""

import sys


def run() -> None:
    """The command line, or one line saying what to install where its dependencies are missing
    (the runtime-only install, numpy and safetensors, has no click)."""
    try:
        from .cli import main
    except ModuleNotFoundError as exc:
        if not exc.name or exc.name.partition(".")[0] == "grammarc":
            raise
        sys.stderr.write(
            f"error: the grammarc command needs {exc.name}, which is not installed (a "
            "runtime-only install has numpy and safetensors alone); install grammarc with its "
            "dependencies to use it: pip install dist/grammarc-*.whl (without --no-deps), or "
            "pip install -e . in a clone\n")
        sys.exit(1)
    main()


if __name__ == "__main__":
    run()
