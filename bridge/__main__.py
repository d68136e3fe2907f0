from bridge.cli import main

if __name__ == "__main__":  # not when multiprocessing's spawn re-imports this module in a worker
    main()
