from neuron_migrate.entry import main

main()
