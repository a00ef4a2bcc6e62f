from s3events.cli import main

main()
