"""Retrievers for LLM frameworks, each in its own module and an extra of the
`lakehouse-client` distribution (importing this package imports neither framework):

- `lakehouse.integrations.langchain.LakehouseRetriever`: `pip install './clients/python[langchain]'`
- `lakehouse.integrations.llamaindex.LakehouseRetriever`: `pip install './clients/python[llamaindex]'`

(from a Lakehouse checkout; `lakehouse-client[langchain]` once it is on an index you use.
A distribution named `lakehouse` on PyPI is another project.)
"""


def missing_framework(module: str, framework: str, extra: str) -> ImportError:
    """The error of a retriever whose framework is not installed: the extra that brings it,
    named by this project's own distribution (lakehouse-client)."""
    return ImportError(
        f"{module} needs {framework}, the extra `{extra}` of lakehouse-client: "
        f"pip install './clients/python[{extra}]' from a Lakehouse checkout "
        f"(or 'lakehouse-client[{extra}]' from an index that has it)")
