from codemod.entry import main

main()
