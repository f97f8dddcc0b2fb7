from .root import main

main()
