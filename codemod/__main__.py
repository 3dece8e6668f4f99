from codemod.cli import app

app(prog_name="neuron-migrate")
