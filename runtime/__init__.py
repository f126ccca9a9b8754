"""The Datalog engine on Spark SQL."""
