"""spark-submit entry point: `spark-submit [spark options] bin/s3events_main.py capture --props FILE ...`.

spark-submit needs a Python file as its primary resource; this one only hands over to the installed
package (or to one shipped with --py-files).
"""

from s3events.cli import main

main()
