"""Query understanding: what a question asks (analyze), how to split and answer it (plan,
reflect, strategy), when it happened (temporal), what a conversation said (context,
normalize), and the English model behind them (nlp). I/O-free logic: matrixd's
handlers (internal.matrixd.smart) run the searches it plans."""
