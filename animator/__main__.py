"""``python -m animator``: the command line, :mod:`animator.cli.main`."""
from animator.cli.main import run

if __name__ == "__main__":
    run()
