"""What Lakehouse is measured against: Chroma's server, Qdrant's engine, the lexical
references (tantivy, bm25s), and bare servers that show a floor."""
