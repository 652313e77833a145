"""The rich shadow (seed 001), the application: the `echo.<model>` pipe models.

- `filter`: the pipe models' own filter hooks,
- `turn`: one call of a pipe: suture, Gemini, ECHO's own tools, archive.

The rules themselves are in `echo.domain.shadow`; the HTTP route is `echo.entrypoints.http.pipe`.
"""
