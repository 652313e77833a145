"""Adapters to language models: request conversion and provider clients (Gemini first)."""
