"""Tests of the embedding core against our Gemini peer and the bundled local model."""
