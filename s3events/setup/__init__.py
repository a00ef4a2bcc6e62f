"""`s3events setup` / `teardown`: the notification path (queue, dead-letter queue, queue policy, bucket
notifications) created, verified and removed from the configuration.

Pure modules: `model` (what setup wants, what exists, the actions), `policy` and `notifications` (building
and merging the two AWS documents), `plan` (state -> actions), `links` (which link of the path is broken).
I/O: `aws_state` (read the state, apply actions with boto3), `probe` (an object PUT end to end),
`command` (the CLI's glue).
"""
