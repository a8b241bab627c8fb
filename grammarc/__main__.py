"""`python -m grammarc` runs the command line."""

from .cli import main

main()
