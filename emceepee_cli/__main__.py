from emceepee_cli.cli.main import run

run()
