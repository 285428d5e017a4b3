"""The journal's parts that each keep one table (tasks and their results and steps, pending
questions, events, instances, spawned processes): reached as `journal.tasks`, `journal.pending`…"""
