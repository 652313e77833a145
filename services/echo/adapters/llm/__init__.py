"""Adapters to language models. Rule: every provider error leaves as ``errors.LLMError``.

Chat (the pipe, hot path): ``openai_to_gemini`` converts requests, ``gemini_chat`` streams them.
Background work (summaries, distillation, merges, map-reduce) goes through the ``interface.LLM``
port: ``gemini.GeminiLLM``, ``openai_compatible.OpenAICompatibleLLM`` or ``offline.OfflineLLM``,
chosen by ``factory.llm_from_settings``; ``calls`` gives them the same retries (``retries``) and
metrics, ``responses`` reads answers out of any provider's JSON, ``extractive`` holds the offline
text heuristics. Modules are imported by name (``from echo.adapters.llm import gemini``); this package
itself imports nothing.
"""
