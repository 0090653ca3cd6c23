"""Teacher training: supervised imitation of the env gateway expert (`turnopd teacher train`)."""
