"""The same claim run on Locust's distributed master/worker load."""
