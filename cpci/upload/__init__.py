"""Uploading results: JUnit conversion, the run envelope, and sending it to the service."""
