"""Evita bootstrap: grammar, parser, static checks, scheduler, planner, CLI."""
