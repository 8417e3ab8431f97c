"""The tape compiler: graphs in, programs out.

``ir`` (the graph, its op table and verifier), ``ir_text`` (the graph as text),
``dims`` (symbolic sizes), ``backends/`` (the scheduler, the kernel IR and its dialect
printers, the runtimes), ``cache`` (the on-disk kernel cache), ``profiler`` and
``malloc``. The graph passes are the top-level package ``passes``. Nothing here knows
``Tensor``, the tape or a TF or Keras name: the core above hands graphs down and gets
programs back.
"""
