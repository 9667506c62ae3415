"""GitHub webhook deliveries, after the route stored them: acting on one (`handling`: which PRs
it concerns, the bot's refresh of each) and the background thread that works off the stored
queue (`worker`). The route that checks and stores a delivery is `api/routes/webhooks.py`."""
