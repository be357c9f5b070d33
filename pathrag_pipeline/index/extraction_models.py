"""The shape of what extraction produces for one chunk, shared by the LLM and the offline extractor.

These pydantic models are also the instructor response models, so their field descriptions are part of
the prompt the LLM sees. Validation keeps names non-empty; relation endpoints missing from the entity
list are added by ``ChunkExtraction.normalised()``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator


class Entity(BaseModel):
    name: str = Field(description="Name of the entity, as written in the text (proper noun or key concept)")
    type: str = Field(default="concept", description="One of: person, organization, location, event, work, date, concept, other")
    description: str = Field(default="", description="What the text says about this entity")

    @field_validator("name")
    @classmethod
    def _name_not_empty(cls, value: str) -> str:
        value = " ".join(value.split())
        if not value:
            raise ValueError("entity name must not be empty")
        return value


class Relation(BaseModel):
    source: str = Field(description="Name of the source entity")
    target: str = Field(description="Name of the target entity")
    keywords: str = Field(default="", description="Comma-separated high-level keywords for the relationship")
    description: str = Field(default="", description="How source and target are related, according to the text")
    strength: float = Field(default=1.0, ge=0.0, le=10.0, description="Strength of the relationship, 1 (weak) to 10 (strong)")

    @field_validator("source", "target")
    @classmethod
    def _endpoint_not_empty(cls, value: str) -> str:
        value = " ".join(value.split())
        if not value:
            raise ValueError("relation endpoints must not be empty")
        return value


class ChunkExtraction(BaseModel):
    entities: list[Entity] = Field(default_factory=list)
    relations: list[Relation] = Field(default_factory=list)

    def normalised(self) -> "ChunkExtraction":
        """Drop self-loops and add entities that relations name but the entity list lacks."""
        known = {e.name.casefold() for e in self.entities}
        entities = list(self.entities)
        relations = []
        for rel in self.relations:
            if rel.source.casefold() == rel.target.casefold():
                continue
            for endpoint in (rel.source, rel.target):
                if endpoint.casefold() not in known:
                    known.add(endpoint.casefold())
                    entities.append(Entity(name=endpoint, type="other", description=""))
            relations.append(rel)
        return ChunkExtraction(entities=entities, relations=relations)
