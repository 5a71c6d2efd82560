"""`python -m regressbisect ...` = the `regressbisect` command (for machines without the script)."""
from regressbisect.cli import main

main()
