"""kaflet's cluster wing: chaos operations on a running broker (chaos.py), their HTTP control API
(control.py), `kaflet chaos` (cli.py) and the pytest plugin (pytest_plugin.py)."""
