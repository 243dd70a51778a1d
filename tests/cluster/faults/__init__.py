"""The cluster fault harness (issue 33, item 5): what it injects between processes on one machine."""
