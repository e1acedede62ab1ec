"""The Trafka broker: trio TCP server, one handler per API, group coordinator, CLI."""
