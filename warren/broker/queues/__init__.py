"""What every queue type has, ``QueueBase`` (``base.py``); the classic queue's parts, each a job
of ``Queue`` (``warren/broker/queue.py``): ``expiry``, ``length_limits``, ``delivery_limit``,
``consumer_choice``, ``paging``, ``flow_marks``; the queue kinds besides the classic queue
(``priority``, ``last_value``, ``message_groups`` and ``quorum`` subclass ``Queue``; ``stream``
derives from ``QueueBase`` alone), and the one place that maps declare arguments to a kind
(``factory.py``); Qpid's queue arguments in ``qpid_args.py``. Import each from its module."""
