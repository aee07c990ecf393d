from convbench.cli import main

main()
