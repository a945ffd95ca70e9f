"""The search modes, one module each (`vector`, `keyword`, `lexical`, `hybrid`), each one async function of `engine.Search`'s signature."""
