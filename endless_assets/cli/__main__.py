from endless_assets.cli import main

main()
