"""The streaming job tests/spark/test_faults.py kills: a stream read with the ``warren`` source,
each body transformed (``out:`` before it, persistent), written through the ``warren`` sink to
an exchange, with a checkpoint, until the stream's end as it was when the job started
(``Trigger.AvailableNow``). Run as a script (its own driver, so a test can SIGKILL it):

    python tests/spark/faults_job.py MASTER URL HTTP_URL STREAM EXCHANGE CHECKPOINT PER_TRIGGER PER_PARTITION

On ``local-cluster[1,1,768]`` the executor is a JVM of its own that a test can kill alone;
Spark's master inside the driver then starts another one and retries its tasks. The job exits
0 once every batch is committed; it prints ``BATCH <id> <rows>`` as each batch ends.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    master, url, http_url, stream, exchange, checkpoint, per_trigger, per_partition = argv
    quick_jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"  # as tests/spark/conftest.py: starts sooner
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StreamingQueryListener

    from warren.spark import register

    spark = (SparkSession.builder.master(master).appName("warren-faults")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.extraJavaOptions", quick_jvm)
             .config("spark.executor.extraJavaOptions", quick_jvm)
             .config("spark.executor.memory", "512m")
             # a killed executor's tasks are retried; a broker down for a moment too
             .config("spark.task.maxFailures", "20")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)

    class Batches(StreamingQueryListener):
        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            print(f"BATCH {event.progress.batchId} {event.progress.numInputRows}", flush=True)

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    spark.streams.addListener(Batches())
    source = (spark.readStream.format("warren").option("url", url).option("httpUrl", http_url)
              .option("stream", stream).option("startingOffsets", "earliest")
              .option("maxRecordsPerTrigger", per_trigger).option("recordsPerPartition", per_partition)
              .load())
    out = source.select(F.concat(F.lit(b"out:"), F.col("body")).alias("body"),
                        F.lit("").alias("routing_key"),
                        F.struct(F.lit(2).alias("delivery_mode")).alias("properties"))
    query = (out.writeStream.format("warren").option("url", url).option("exchange", exchange)
             .option("confirmWindow", "50").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
