"""Real protocol peers on loopback for the tests (S3 via moto, Gemini via our server)."""
