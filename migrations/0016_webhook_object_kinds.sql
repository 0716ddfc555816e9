-- Webhook events of promo code uses (`code_use.*`, about a use) and gift fulfilments
-- (`gift.*`, about a fulfilment): two more kinds of object an event can be about. A
-- `code_use.*` event has no campaign (`campaign_id` NULL).
ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_object_kind_check;
ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_object_kind_check
    CHECK (object_kind IN ('claim', 'campaign', 'code_use', 'gift'));
