"""Retrievers for LLM frameworks, each in its own module and extra (importing this
package imports neither framework):

- `lakehouse.integrations.langchain.LakehouseRetriever`: `pip install 'lakehouse[langchain]'`
- `lakehouse.integrations.llamaindex.LakehouseRetriever`: `pip install 'lakehouse[llamaindex]'`
"""
