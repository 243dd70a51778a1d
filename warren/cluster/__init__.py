"""A Warren cluster on etcd (issue 32, docs/clustering.md): what is built so far is starting one.

``etcd.py`` is a small asyncio client of etcd 3.4's JSON gateway; ``node.py`` creates or joins
a cluster at start-up, keeps this node's membership lease alive and follows the member list (a
watch). Imported only by the server when ``--cluster-etcd`` is given: no protocol, broker,
management or Spark module imports it (tests/test_layers.py), and a single node never loads it.
"""
